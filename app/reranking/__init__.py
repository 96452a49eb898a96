"""Reranking: an external Cohere/Jina-style `/rerank` endpoint that orders passages by relevance
to a query (`client`), and the probe that tells an operator what its scores mean (`calibration`).
"""
