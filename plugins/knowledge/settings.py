"""`[plugins.knowledge]` (docs/configuration.md, docs/knowledge.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings

from . import chunking


class KnowledgeSettings(PluginSettings):
    max_content_chars = fields.Integer(load_default=2_000_000, validate=validate.Range(min=1000), metadata={
        "description": "Most characters of text one document may hold (after extraction from a file or page)."})
    inline_index_chars = fields.Integer(load_default=8_000, validate=validate.Range(min=0), metadata={
        "description": "Documents of at most this many characters are indexed before the create call answers "
                       "(`index_status` ready); longer ones answer at once and are indexed in the background."})
    max_bases_per_user = fields.Integer(load_default=100, validate=validate.Range(min=1), metadata={
        "description": "Most knowledge bases one user keeps."})
    max_documents_per_base = fields.Integer(load_default=1000, validate=validate.Range(min=1), metadata={
        "description": "Most documents one knowledge base holds."})
    chunk_max_units = fields.Integer(load_default=chunking.DEFAULT_MAX_UNITS,
                                     validate=validate.Range(min=100, max=4000),
                                     metadata={"description": "Largest chunk, in characters (a CJK character "
                                                              "counts three)."})
    chunk_min_units = fields.Integer(load_default=chunking.DEFAULT_MIN_UNITS, validate=validate.Range(min=0),
                                     metadata={"description": "A chunk ends at a paragraph's end once it holds this "
                                                              "many units."})
    chunk_overlap_units = fields.Integer(load_default=chunking.DEFAULT_OVERLAP_UNITS, validate=validate.Range(min=0),
                                         metadata={"description": "Whole sentences, up to this many units, that a "
                                                                  "chunk repeats from the one before when a "
                                                                  "paragraph is cut between them."})
    url_timeout = fields.Float(load_default=20.0, validate=validate.Range(min=0, min_inclusive=False), metadata={
        "description": "Seconds fetching a `url` document may take (the `[fetch]` policy decides where it may go)."})
    url_max_bytes = fields.Integer(load_default=10 * 1024 * 1024, validate=validate.Range(min=1024), metadata={
        "description": "Largest page or file fetched for a `url` document, in bytes."})
    index_batch = fields.Integer(load_default=32, validate=validate.Range(min=1, max=1024), metadata={
        "description": "Chunks embedded and stored per step of indexing."})
