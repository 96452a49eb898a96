"""The websockets of one web process, served on an asyncio loop of their own.

A socket's upgrade request is an ordinary request (authorized by the Flask view in
app/web/websocket.py, on a request thread); once answered 101 its connection is handed to
this process's `Hub` (hub.py), and the request thread is free again. The hub follows each
socket's workstream on Redis only while a socket here follows it (subscriptions.py), relays
its events in order (follower.py), and keeps every connection bounded (connection.py, caps.py).
"""
