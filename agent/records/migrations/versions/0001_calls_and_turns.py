"""Calls and their turns."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "calls",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("transport", sa.String(16), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False, server_default=""),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", sa.String(32), nullable=True),
        sa.Column("turn_count", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_calls_status", "calls", ["status"])
    op.create_index("ix_calls_started_at", "calls", ["started_at"])
    op.create_table(
        "turns",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("call_id", sa.String(128), sa.ForeignKey("calls.id", ondelete="CASCADE"), nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("user_text", sa.Text, nullable=False, server_default=""),
        sa.Column("bot_text", sa.Text, nullable=False, server_default=""),
        sa.Column("interrupted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("speculative", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("fast_path", sa.String(64), nullable=True),
        sa.Column("tool_calls", sa.JSON, nullable=False),
        sa.Column("latency_ms", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_turns_call_id", "turns", ["call_id"])


def downgrade() -> None:
    op.drop_table("turns")
    op.drop_table("calls")
