"""Per-series sample count and newest value, kept up to date at ingestion.

Listing resources (the dashboard polls it) used to count every stored measurement; with months
of data that is a full scan per poll. Existing rows are backfilled from the measurements.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.add_column(sa.Column("samples", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("latest_timestamp", sa.Float(), nullable=True))
        batch.add_column(sa.Column("latest_value", sa.Float(), nullable=True))
    op.execute(
        """
        UPDATE series SET
          samples = (SELECT count(*) FROM measurements m WHERE m.series_id = series.id),
          latest_timestamp = (SELECT max(m.timestamp) FROM measurements m
                              WHERE m.series_id = series.id)
        """
    )
    op.execute(
        """
        UPDATE series SET latest_value = (
          SELECT m.value FROM measurements m
          WHERE m.series_id = series.id AND m.timestamp = series.latest_timestamp)
        WHERE latest_timestamp IS NOT NULL
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.drop_column("latest_value")
        batch.drop_column("latest_timestamp")
        batch.drop_column("samples")
