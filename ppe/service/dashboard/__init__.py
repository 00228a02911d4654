"""The operator dashboard: server-rendered pages that draw the API's JSON with plotly."""
