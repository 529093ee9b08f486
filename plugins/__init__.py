"""Built-in feature plugins, each published under the gateway.plugins entry-point group."""
