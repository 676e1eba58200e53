"""HTTP and WebSocket routers, one per resource."""

from fastapi import APIRouter

from gateway.api import admin, attachments, chat, documents, feedback, health, turns

api_router = APIRouter()
api_router.include_router(chat.router)
api_router.include_router(feedback.router)
api_router.include_router(turns.router)
api_router.include_router(documents.router)
api_router.include_router(attachments.router)
api_router.include_router(admin.router)
api_router.include_router(health.router)
