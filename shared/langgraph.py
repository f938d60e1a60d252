"""`memoryd.langgraph`: LangGraph's long-term memory store over memoryd.

    from memoryd.langgraph import MemorydStore
    store = MemorydStore.from_url("http://127.0.0.1:8420", api_key)
    graph = builder.compile(store=store)

The public name of `memoryd.integrations.langgraph_store` (its docstring holds the contract:
namespaces, items, writes as jobs, search). Needs the `langgraph` extra
(`pip install 'memoryd[langgraph]'`); without it, importing this module raises ImportError
saying so.
"""

from memoryd.integrations.langgraph_store import (
    MemorydStore,
    NamespaceError,
    StoreInputError,
)

__all__ = ["MemorydStore", "NamespaceError", "StoreInputError"]
