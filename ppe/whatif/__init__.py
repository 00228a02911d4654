"""What-if: describe machines that do not exist yet and predict how an application would run
on them, with PetaSIM's objects (nodesets, linksets, datasets, distributions, execution
scripts) on top of PPE's own models, scheduler and stochastic engines. docs/whatif.md.

Pure: the spec is text, files it names are read by the caller's resolver.
"""
