"""The performance database of runs: measured runs and run reports.

One row per run (an application's kernel at some parameter values on a system, its
repetitions' values), optionally linked to the schedule it followed; the link is set null when
retention trims that schedule from the served log. ``(app, key)`` is unique: re-posting a batch
stores nothing new.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("kernel", sa.String(255), nullable=False),
        sa.Column("system", sa.String(1024), nullable=True),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column(
            "schedule_id",
            Id,
            sa.ForeignKey("served_log.id", ondelete="SET NULL", name="fk_runs_schedule"),
            nullable=True,
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("app", "key", name="uq_runs_app_key"),
    )
    op.create_index("ix_runs_app_id", "runs", ["app", "id"])
    op.create_index("ix_runs_app_kernel_id", "runs", ["app", "kernel", "id"])
    op.create_index("ix_runs_system_id", "runs", ["system", "id"])
    op.create_index("ix_runs_status_id", "runs", ["status", "id"])
    op.create_index("ix_runs_schedule_id", "runs", ["schedule_id"])


def downgrade() -> None:
    op.drop_table("runs")
