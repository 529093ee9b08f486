"""What the files plugin offers other plugins: finding an uploaded file and a link to it."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey


class Files(Protocol):
    async def find(self, file_id: str) -> dict | None:
        """The file's record, None when there is no such file."""
        ...

    async def read_content(self, file_id: str) -> bytes | None:
        """The file's stored bytes, None when the file or its stored content is gone."""
        ...

    def signed_download_url(self, file_id: str, ttl: int = 300, base_url: str = "") -> str:
        """A download link that works without a token for `ttl` seconds."""
        ...


FILES: ContractKey[Files] = ContractKey("files.files", "uploaded files")
