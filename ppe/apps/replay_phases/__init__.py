"""``ppe-pas2p-replay``: a PAS2P signature replayed with busy work and the recorded messages, for
programs that cannot run one of their steps alone (docs/pas2p.md, "The generic replayer")."""
