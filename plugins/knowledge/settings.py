"""`[plugins.knowledge]` (docs/configuration.md, docs/knowledge.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

from . import chunking, extraction

_LIMITS = extraction.Limits()


@dataclass(frozen=True, kw_only=True)
class KnowledgeSettings(PluginSettings):
    max_content_chars: int = setting(fields.Integer(load_default=2_000_000, validate=validate.Range(min=1000), metadata={
        "description": "Most characters of text one document may hold (after extraction from a file or page)."}))
    inline_index_chars: int = setting(fields.Integer(load_default=8_000, validate=validate.Range(min=0), metadata={
        "description": "Documents of at most this many characters are indexed before the create call answers "
                       "(`index_status` ready); longer ones answer at once and are indexed in the background."}))
    max_bases_per_user: int = setting(fields.Integer(load_default=100, validate=validate.Range(min=1), metadata={
        "description": "Most knowledge bases one user keeps."}))
    max_documents_per_base: int = setting(fields.Integer(load_default=1000, validate=validate.Range(min=1), metadata={
        "description": "Most documents one knowledge base holds."}))
    chunk_max_units: int = setting(fields.Integer(load_default=chunking.DEFAULT_MAX_UNITS,
                                     validate=validate.Range(min=100, max=4000),
                                     metadata={"description": "Largest chunk, in characters (a CJK character "
                                                              "counts three)."}))
    chunk_min_units: int = setting(fields.Integer(load_default=chunking.DEFAULT_MIN_UNITS, validate=validate.Range(min=0),
                                     metadata={"description": "A chunk ends at a paragraph's end once it holds this "
                                                              "many units; smaller Markdown sections in a row "
                                                              "share a chunk until it does (0: never)."}))
    max_chunks_per_document: int = setting(fields.Integer(load_default=10_000, validate=validate.Range(min=1), metadata={
        "description": "Most chunks one document may be cut into; a document that needs more is refused (400 "
                       "`too_many_chunks`). Two million characters of prose make about 3,000 (English) to 8,500 "
                       "(Chinese)."}))
    extract_cpu_seconds: float = setting(fields.Float(load_default=60.0, validate=validate.Range(min=1), metadata={
        "description": "CPU seconds that reading one PDF, Word file or web page may take (it runs in a child "
                       "process; beyond: 400 `document_too_complex`)."}))
    extract_memory_bytes: int = setting(fields.Integer(load_default=1024 * 1024 * 1024,
                                          validate=validate.Range(min=32 * 1024 * 1024), metadata={
        "description": "Memory, in bytes, that reading one PDF, Word file or web page may take beyond the "
                       "reader's own (beyond: 400 `document_too_complex`)."}))
    extract_max_part_bytes: int = setting(fields.Integer(load_default=_LIMITS.max_part_bytes, validate=validate.Range(min=1024),
                                            metadata={"description": "Most bytes one part of a Word file (a ZIP "
                                                                     "archive) may unpack to."}))
    extract_max_unpacked_bytes: int = setting(fields.Integer(load_default=_LIMITS.max_unpacked_bytes,
                                                validate=validate.Range(min=1024),
                                                metadata={"description": "Most bytes all parts of a Word file may "
                                                                         "unpack to together."}))
    extract_max_ratio: int = setting(fields.Integer(load_default=_LIMITS.max_ratio, validate=validate.Range(min=10), metadata={
        "description": "Most times its packed size that a part of a Word file of 1 MiB or more may unpack to."}))
    extract_max_pdf_content_bytes: int = setting(fields.Integer(load_default=_LIMITS.max_pdf_content_bytes,
                                                   validate=validate.Range(min=1024), metadata={
        "description": "Most bytes of page content (decoded content streams, a stream shared by pages counted "
                       "once) a PDF may hold."}))
    chunk_overlap_units: int = setting(fields.Integer(load_default=chunking.DEFAULT_OVERLAP_UNITS, validate=validate.Range(min=0),
                                         metadata={"description": "Whole sentences, up to this many units, that a "
                                                                  "chunk repeats from the one before when a "
                                                                  "paragraph is cut between them."}))
    url_timeout: float = setting(fields.Float(load_default=20.0, validate=validate.Range(min=0, min_inclusive=False), metadata={
        "description": "Seconds fetching a `url` document may take (the `[fetch]` policy decides where it may go)."}))
    url_max_bytes: int = setting(fields.Integer(load_default=10 * 1024 * 1024, validate=validate.Range(min=1024), metadata={
        "description": "Largest page or file fetched for a `url` document, in bytes."}))
    index_batch: int = setting(fields.Integer(load_default=32, validate=validate.Range(min=1, max=1024), metadata={
        "description": "Chunks embedded and stored per step of indexing."}))
