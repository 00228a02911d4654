"""Parameterization templates: a grammar expression over application and system parameters,
stored by name and owned by the token that stored it (like user models).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "templates",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column(
            "owner_token_id",
            Id,
            sa.ForeignKey("api_tokens.id", ondelete="SET NULL", name="fk_templates_owner_token"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    op.drop_table("templates")
