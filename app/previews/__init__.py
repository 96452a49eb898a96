"""Previews and attachments: what open_preview shows beside the conversation, the files people
attach, the bytes both keep (content-addressed per workstream), and the inert way they are served.
"""
