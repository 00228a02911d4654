"""Empirical models fitted to stored runs and saved by name (POST /api/v1/models/empirical
with ``save_as``): the series they describe, the fitted and requested types, the parameters
held fixed, the model as JSON (``EmpiricalModel.to_dict``) and when it was fitted.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "empirical_models",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("kernel", sa.String(255), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("system", sa.String(1024), nullable=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("requested_type", sa.String(32), nullable=False),
        sa.Column("fixed", sa.JSON(), nullable=False),
        sa.Column("model", sa.JSON(), nullable=False),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("fitted_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("empirical_models")
