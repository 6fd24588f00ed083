"""Which server ran a call, its recording, and the webhook outbox."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("calls") as calls:
        calls.add_column(sa.Column("instance", sa.String(64), nullable=True))
        calls.add_column(sa.Column("recording", sa.String(512), nullable=True))
        calls.create_index("ix_calls_instance", ["instance"])
    op.create_table(
        "webhook_outbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_webhook_outbox_call_id", "webhook_outbox", ["call_id"])
    op.create_index("ix_webhook_outbox_next_attempt_at", "webhook_outbox", ["next_attempt_at"])


def downgrade() -> None:
    op.drop_table("webhook_outbox")
    with op.batch_alter_table("calls") as calls:
        calls.drop_index("ix_calls_instance")
        calls.drop_column("recording")
        calls.drop_column("instance")
