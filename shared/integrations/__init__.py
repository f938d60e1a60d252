"""Adapters that let agents reach memoryd through the surfaces they already use (MCP).

Each adapter is a thin layer over the Python client (`memoryd.client`): requests, validation,
tenancy and errors are the REST API's own, so no read or write logic is copied here.
"""
