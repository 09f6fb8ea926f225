"""Local HTTP servers speaking the providers' wire formats, so adapters run their real SDKs in tests."""
