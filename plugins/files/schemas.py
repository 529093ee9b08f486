"""What the files and image-analysis endpoints take and answer beyond their JSON schemas, for
the OpenAPI document (spec: "File", "Image analysis result")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

BINARY = {"type": "string", "format": "binary"}


class UploadForm(marshmallow.Schema):
    file = fields.Raw(required=True, metadata={**BINARY, "description": "The file, up to 20 MB, of an allowed type."})


class UploadQuery(marshmallow.Schema):
    user_id = fields.String(metadata={"description": "The administrator may upload for another user."})


class SignedDownloadQuery(marshmallow.Schema):
    expires = fields.Integer(metadata={"description": "With `signature`: a link that needs no bearer token "
                                                      "(handed to the AI core), valid until then (Unix seconds)."})
    signature = fields.String(metadata={"description": "The link's HMAC; without it the bearer token is required."})


class ImageForm(marshmallow.Schema):
    file = fields.Raw(metadata={**BINARY, "description": "A JPEG, PNG or GIF image, up to 10 MB."})
    image = fields.Raw(metadata={**BINARY, "description": "The same, under the other accepted name."})


class FileRecord(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    user_id = fields.String(required=True)
    filename = fields.String(required=True, metadata={"description": "The sanitized name."})
    mime_type = fields.String(required=True)
    size = fields.Integer(required=True, metadata={"description": "Bytes."})
    hash = fields.String(required=True, metadata={"description": "SHA-256, hex."})
    is_public = fields.Boolean(required=True)
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    url = fields.String(required=True, metadata={"description": "`/api/v1/files/<id>/download`"})
    thumbnail_url = fields.String(metadata={"description": "Images only: `/api/v1/files/<id>/thumbnail`"})


class FilePage(marshmallow.Schema):
    files = fields.List(fields.Nested(FileRecord), required=True, metadata={"description": "Newest first."})
    total = fields.Integer(required=True)
    page = fields.Integer(required=True)
    limit = fields.Integer(required=True)


class FileDeleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))


class Colour(marshmallow.Schema):
    hex = fields.String(required=True, metadata={"description": "`#rrggbb`"})
    percent = fields.Float(required=True, metadata={"description": "Share of the pixels."})


class ImageAnalysis(marshmallow.Schema):
    format = fields.String(required=True, metadata={"description": "JPEG, PNG, GIF, ..."})
    width = fields.Integer(required=True)
    height = fields.Integer(required=True)
    file_size = fields.Integer(required=True, metadata={"description": "Bytes."})
    description = fields.String(required=True)
    top_colors = fields.List(fields.Nested(Colour), required=True)
    exif = fields.Dict(keys=fields.String(), required=True, metadata={"description": "Readable EXIF tags by name."})
    analyzed_by = fields.String(required=True, validate=validate.OneOf(["openai_vision", "local"]))
    model = fields.String(metadata={"description": "The vision model that described it (openai_vision only)."})
