"""The browser client (index.html, app.js, style.css): package data served at / by agent/server.py."""
