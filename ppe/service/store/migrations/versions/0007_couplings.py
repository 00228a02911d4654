"""Kernel couplings kept per application, metric, system and loop (Prophecy's third method):
the report of POST /api/v1/coupling with `save`, replaced by the next one for the same loop.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "couplings",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("system", sa.String(1024), nullable=True),
        sa.Column("system_key", sa.String(1024), nullable=False),
        sa.Column("loop", sa.String(2048), nullable=False),
        sa.Column("kernels", sa.JSON(), nullable=False),
        sa.Column("coefficients", sa.JSON(), nullable=False),
        sa.Column("stable", sa.Boolean(), nullable=True),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("computed_at", sa.Float(), nullable=False),
        sa.UniqueConstraint(
            "app", "metric", "system_key", "loop", name="uq_couplings_app_metric_system_loop"
        ),
    )
    op.create_index("ix_couplings_app", "couplings", ["app"])


def downgrade() -> None:
    op.drop_index("ix_couplings_app", table_name="couplings")
    op.drop_table("couplings")
