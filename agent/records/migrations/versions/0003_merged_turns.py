"""A turn that continued the one before it (the caller went on after a pause)."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as turns:
        turns.add_column(sa.Column("merged", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("turns") as turns:
        turns.drop_column("merged")
