"""HTTP routers, one module per resource of the contract."""
