"""The OpenAPI documents, generated from the served kinds' models.

`models` declares the shared meta types, `builder` turns models into schema definitions, `paths`
names and documents every route, `documents` assembles the Swagger 2.0 and OpenAPI 3.0 documents, and
`gnostic` encodes the 2.0 one as kube-apiserver's protobuf (with `goyaml` for the YAML it embeds).
Serving them is the HTTP layer's (`apiserver.http.openapi`).
"""

from apiserver.openapi.documents import Documents, build_documents

__all__ = ["Documents", "build_documents"]
