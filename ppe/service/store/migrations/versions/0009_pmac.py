"""PMaC: measured machine profiles per host (versioned) and posted application signatures.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "host_profiles",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column(
            "resource_id",
            Id,
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("measured_at", sa.Float(), nullable=False),
        sa.Column("method", sa.String(255), nullable=False),
        sa.Column("quick", sa.Boolean(), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("resource_id", "version", name="uq_host_profiles_resource_version"),
    )
    op.create_table(
        "signatures",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_signatures_name_version"),
    )


def downgrade() -> None:
    op.drop_table("signatures")
    op.drop_table("host_profiles")
