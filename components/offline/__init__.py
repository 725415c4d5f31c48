"""The offline engine: run the program under Pulumi's mocks, record it, write preview.json and manifests."""
