"""PAS2P phase signatures (versioned by name) and the probes run with them on hosts.

Tables of their own rather than rows of ``signatures``: a PMaC signature is TOML text that
planning convolves, a PAS2P one the JSON analysis of a traced run (docs/pas2p.md).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "phase_signatures",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("app", sa.String(128), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("ranks", sa.Integer(), nullable=False),
        sa.Column("analysis", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_phase_signatures_name_version"),
    )
    op.create_table(
        "phase_probes",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column(
            "signature_id",
            Id,
            sa.ForeignKey("phase_signatures.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "resource_id",
            Id,
            sa.ForeignKey("resources.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_phase_probes_signature_id", "phase_probes", ["signature_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_phase_probes_signature_id", table_name="phase_probes")
    op.drop_table("phase_probes")
    op.drop_table("phase_signatures")
