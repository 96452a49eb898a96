"""Reranking: an external Cohere/Jina-style `/rerank` endpoint that orders passages by relevance
to a query (`client`), BM25's memories, tools and skills ordered by it (`retrieval`), and the
probe that tells an operator what its scores mean (`calibration`).
"""
