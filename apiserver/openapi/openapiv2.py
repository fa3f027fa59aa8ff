"""The messages of gnostic's `openapi.v2` package (github.com/google/gnostic-models v0.6.9,
openapiv2/OpenAPIv2.proto), the protobuf form of a Swagger 2.0 document that kube-apiserver serves
at /openapi/v2, as protobuf message classes.

protobuf's Python runtime compiles no .proto text and protoc's output is not meant to be checked
in, so the declarations (names, numbers and types only: the wire contract) are compiled here.
"""

from __future__ import annotations

import re

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message, message_factory

PACKAGE = "openapi.v2"
_DECLARATIONS = """
message AdditionalPropertiesItem {
  oneof oneof {
    Schema schema = 1;
    bool boolean = 2;
  }
}
message Any {
  google.protobuf.Any value = 1;
  string yaml = 2;
}
message ApiKeySecurity {
  string type = 1;
  string name = 2;
  string in = 3;
  string description = 4;
  repeated NamedAny vendor_extension = 5;
}
message BasicAuthenticationSecurity {
  string type = 1;
  string description = 2;
  repeated NamedAny vendor_extension = 3;
}
message BodyParameter {
  string description = 1;
  string name = 2;
  string in = 3;
  bool required = 4;
  Schema schema = 5;
  repeated NamedAny vendor_extension = 6;
}
message Contact {
  string name = 1;
  string url = 2;
  string email = 3;
  repeated NamedAny vendor_extension = 4;
}
message Default {
  repeated NamedAny additional_properties = 1;
}
message Definitions {
  repeated NamedSchema additional_properties = 1;
}
message Document {
  string swagger = 1;
  Info info = 2;
  string host = 3;
  string base_path = 4;
  repeated string schemes = 5;
  repeated string consumes = 6;
  repeated string produces = 7;
  Paths paths = 8;
  Definitions definitions = 9;
  ParameterDefinitions parameters = 10;
  ResponseDefinitions responses = 11;
  repeated SecurityRequirement security = 12;
  SecurityDefinitions security_definitions = 13;
  repeated Tag tags = 14;
  ExternalDocs external_docs = 15;
  repeated NamedAny vendor_extension = 16;
}
message Examples {
  repeated NamedAny additional_properties = 1;
}
message ExternalDocs {
  string description = 1;
  string url = 2;
  repeated NamedAny vendor_extension = 3;
}
message FileSchema {
  string format = 1;
  string title = 2;
  string description = 3;
  Any default = 4;
  repeated string required = 5;
  string type = 6;
  bool read_only = 7;
  ExternalDocs external_docs = 8;
  Any example = 9;
  repeated NamedAny vendor_extension = 10;
}
message FormDataParameterSubSchema {
  bool required = 1;
  string in = 2;
  string description = 3;
  string name = 4;
  bool allow_empty_value = 5;
  string type = 6;
  string format = 7;
  PrimitivesItems items = 8;
  string collection_format = 9;
  Any default = 10;
  double maximum = 11;
  bool exclusive_maximum = 12;
  double minimum = 13;
  bool exclusive_minimum = 14;
  int64 max_length = 15;
  int64 min_length = 16;
  string pattern = 17;
  int64 max_items = 18;
  int64 min_items = 19;
  bool unique_items = 20;
  repeated Any enum = 21;
  double multiple_of = 22;
  repeated NamedAny vendor_extension = 23;
}
message Header {
  string type = 1;
  string format = 2;
  PrimitivesItems items = 3;
  string collection_format = 4;
  Any default = 5;
  double maximum = 6;
  bool exclusive_maximum = 7;
  double minimum = 8;
  bool exclusive_minimum = 9;
  int64 max_length = 10;
  int64 min_length = 11;
  string pattern = 12;
  int64 max_items = 13;
  int64 min_items = 14;
  bool unique_items = 15;
  repeated Any enum = 16;
  double multiple_of = 17;
  string description = 18;
  repeated NamedAny vendor_extension = 19;
}
message HeaderParameterSubSchema {
  bool required = 1;
  string in = 2;
  string description = 3;
  string name = 4;
  string type = 5;
  string format = 6;
  PrimitivesItems items = 7;
  string collection_format = 8;
  Any default = 9;
  double maximum = 10;
  bool exclusive_maximum = 11;
  double minimum = 12;
  bool exclusive_minimum = 13;
  int64 max_length = 14;
  int64 min_length = 15;
  string pattern = 16;
  int64 max_items = 17;
  int64 min_items = 18;
  bool unique_items = 19;
  repeated Any enum = 20;
  double multiple_of = 21;
  repeated NamedAny vendor_extension = 22;
}
message Headers {
  repeated NamedHeader additional_properties = 1;
}
message Info {
  string title = 1;
  string version = 2;
  string description = 3;
  string terms_of_service = 4;
  Contact contact = 5;
  License license = 6;
  repeated NamedAny vendor_extension = 7;
}
message ItemsItem {
  repeated Schema schema = 1;
}
message JsonReference {
  string _ref = 1;
  string description = 2;
}
message License {
  string name = 1;
  string url = 2;
  repeated NamedAny vendor_extension = 3;
}
message NamedAny {
  string name = 1;
  Any value = 2;
}
message NamedHeader {
  string name = 1;
  Header value = 2;
}
message NamedParameter {
  string name = 1;
  Parameter value = 2;
}
message NamedPathItem {
  string name = 1;
  PathItem value = 2;
}
message NamedResponse {
  string name = 1;
  Response value = 2;
}
message NamedResponseValue {
  string name = 1;
  ResponseValue value = 2;
}
message NamedSchema {
  string name = 1;
  Schema value = 2;
}
message NamedSecurityDefinitionsItem {
  string name = 1;
  SecurityDefinitionsItem value = 2;
}
message NamedString {
  string name = 1;
  string value = 2;
}
message NamedStringArray {
  string name = 1;
  StringArray value = 2;
}
message NonBodyParameter {
  oneof oneof {
    HeaderParameterSubSchema header_parameter_sub_schema = 1;
    FormDataParameterSubSchema form_data_parameter_sub_schema = 2;
    QueryParameterSubSchema query_parameter_sub_schema = 3;
    PathParameterSubSchema path_parameter_sub_schema = 4;
  }
}
message Oauth2AccessCodeSecurity {
  string type = 1;
  string flow = 2;
  Oauth2Scopes scopes = 3;
  string authorization_url = 4;
  string token_url = 5;
  string description = 6;
  repeated NamedAny vendor_extension = 7;
}
message Oauth2ApplicationSecurity {
  string type = 1;
  string flow = 2;
  Oauth2Scopes scopes = 3;
  string token_url = 4;
  string description = 5;
  repeated NamedAny vendor_extension = 6;
}
message Oauth2ImplicitSecurity {
  string type = 1;
  string flow = 2;
  Oauth2Scopes scopes = 3;
  string authorization_url = 4;
  string description = 5;
  repeated NamedAny vendor_extension = 6;
}
message Oauth2PasswordSecurity {
  string type = 1;
  string flow = 2;
  Oauth2Scopes scopes = 3;
  string token_url = 4;
  string description = 5;
  repeated NamedAny vendor_extension = 6;
}
message Oauth2Scopes {
  repeated NamedString additional_properties = 1;
}
message Operation {
  repeated string tags = 1;
  string summary = 2;
  string description = 3;
  ExternalDocs external_docs = 4;
  string operation_id = 5;
  repeated string produces = 6;
  repeated string consumes = 7;
  repeated ParametersItem parameters = 8;
  Responses responses = 9;
  repeated string schemes = 10;
  bool deprecated = 11;
  repeated SecurityRequirement security = 12;
  repeated NamedAny vendor_extension = 13;
}
message Parameter {
  oneof oneof {
    BodyParameter body_parameter = 1;
    NonBodyParameter non_body_parameter = 2;
  }
}
message ParameterDefinitions {
  repeated NamedParameter additional_properties = 1;
}
message ParametersItem {
  oneof oneof {
    Parameter parameter = 1;
    JsonReference json_reference = 2;
  }
}
message PathItem {
  string _ref = 1;
  Operation get = 2;
  Operation put = 3;
  Operation post = 4;
  Operation delete = 5;
  Operation options = 6;
  Operation head = 7;
  Operation patch = 8;
  repeated ParametersItem parameters = 9;
  repeated NamedAny vendor_extension = 10;
}
message PathParameterSubSchema {
  bool required = 1;
  string in = 2;
  string description = 3;
  string name = 4;
  string type = 5;
  string format = 6;
  PrimitivesItems items = 7;
  string collection_format = 8;
  Any default = 9;
  double maximum = 10;
  bool exclusive_maximum = 11;
  double minimum = 12;
  bool exclusive_minimum = 13;
  int64 max_length = 14;
  int64 min_length = 15;
  string pattern = 16;
  int64 max_items = 17;
  int64 min_items = 18;
  bool unique_items = 19;
  repeated Any enum = 20;
  double multiple_of = 21;
  repeated NamedAny vendor_extension = 22;
}
message Paths {
  repeated NamedAny vendor_extension = 1;
  repeated NamedPathItem path = 2;
}
message PrimitivesItems {
  string type = 1;
  string format = 2;
  PrimitivesItems items = 3;
  string collection_format = 4;
  Any default = 5;
  double maximum = 6;
  bool exclusive_maximum = 7;
  double minimum = 8;
  bool exclusive_minimum = 9;
  int64 max_length = 10;
  int64 min_length = 11;
  string pattern = 12;
  int64 max_items = 13;
  int64 min_items = 14;
  bool unique_items = 15;
  repeated Any enum = 16;
  double multiple_of = 17;
  repeated NamedAny vendor_extension = 18;
}
message Properties {
  repeated NamedSchema additional_properties = 1;
}
message QueryParameterSubSchema {
  bool required = 1;
  string in = 2;
  string description = 3;
  string name = 4;
  bool allow_empty_value = 5;
  string type = 6;
  string format = 7;
  PrimitivesItems items = 8;
  string collection_format = 9;
  Any default = 10;
  double maximum = 11;
  bool exclusive_maximum = 12;
  double minimum = 13;
  bool exclusive_minimum = 14;
  int64 max_length = 15;
  int64 min_length = 16;
  string pattern = 17;
  int64 max_items = 18;
  int64 min_items = 19;
  bool unique_items = 20;
  repeated Any enum = 21;
  double multiple_of = 22;
  repeated NamedAny vendor_extension = 23;
}
message Response {
  string description = 1;
  SchemaItem schema = 2;
  Headers headers = 3;
  Examples examples = 4;
  repeated NamedAny vendor_extension = 5;
}
message ResponseDefinitions {
  repeated NamedResponse additional_properties = 1;
}
message ResponseValue {
  oneof oneof {
    Response response = 1;
    JsonReference json_reference = 2;
  }
}
message Responses {
  repeated NamedResponseValue response_code = 1;
  repeated NamedAny vendor_extension = 2;
}
message Schema {
  string _ref = 1;
  string format = 2;
  string title = 3;
  string description = 4;
  Any default = 5;
  double multiple_of = 6;
  double maximum = 7;
  bool exclusive_maximum = 8;
  double minimum = 9;
  bool exclusive_minimum = 10;
  int64 max_length = 11;
  int64 min_length = 12;
  string pattern = 13;
  int64 max_items = 14;
  int64 min_items = 15;
  bool unique_items = 16;
  int64 max_properties = 17;
  int64 min_properties = 18;
  repeated string required = 19;
  repeated Any enum = 20;
  AdditionalPropertiesItem additional_properties = 21;
  TypeItem type = 22;
  ItemsItem items = 23;
  repeated Schema all_of = 24;
  Properties properties = 25;
  string discriminator = 26;
  bool read_only = 27;
  Xml xml = 28;
  ExternalDocs external_docs = 29;
  Any example = 30;
  repeated NamedAny vendor_extension = 31;
}
message SchemaItem {
  oneof oneof {
    Schema schema = 1;
    FileSchema file_schema = 2;
  }
}
message SecurityDefinitions {
  repeated NamedSecurityDefinitionsItem additional_properties = 1;
}
message SecurityDefinitionsItem {
  oneof oneof {
    BasicAuthenticationSecurity basic_authentication_security = 1;
    ApiKeySecurity api_key_security = 2;
    Oauth2ImplicitSecurity oauth2_implicit_security = 3;
    Oauth2PasswordSecurity oauth2_password_security = 4;
    Oauth2ApplicationSecurity oauth2_application_security = 5;
    Oauth2AccessCodeSecurity oauth2_access_code_security = 6;
  }
}
message SecurityRequirement {
  repeated NamedStringArray additional_properties = 1;
}
message StringArray {
  repeated string value = 1;
}
message Tag {
  string name = 1;
  string description = 2;
  ExternalDocs external_docs = 3;
  repeated NamedAny vendor_extension = 4;
}
message TypeItem {
  repeated string value = 1;
}
message VendorExtension {
  repeated NamedAny additional_properties = 1;
}
message Xml {
  string name = 1;
  string namespace = 2;
  string prefix = 3;
  bool attribute = 4;
  bool wrapped = 5;
  repeated NamedAny vendor_extension = 6;
}
"""

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
}
_FIELD = re.compile(r"(repeated )?([\w.]+) (\w+) = (\d+);")


def _field(declaration: str, oneof: int | None) -> descriptor_pb2.FieldDescriptorProto:
    match = _FIELD.fullmatch(declaration)
    if match is None:
        raise ValueError(f"not a field declaration: {declaration!r}")
    repeated, type_name, name, number = match.groups()
    field = descriptor_pb2.FieldDescriptorProto(name=name, number=int(number))
    field.label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    else:
        field.type = field.TYPE_MESSAGE
        field.type_name = "." + (type_name if "." in type_name else f"{PACKAGE}.{type_name}")
    if oneof is not None:
        field.oneof_index = oneof
    return field


def compile_declarations(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The file descriptor of proto3 message declarations (messages of scalar, message and repeated
    fields and oneofs, nothing else)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="openapiv2/OpenAPIv2.proto",
        package=PACKAGE,
        syntax="proto3",
        dependency=["google/protobuf/any.proto"],
    )
    current: descriptor_pb2.DescriptorProto | None = None
    oneof: int | None = None
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        if line.startswith("message ") and line.endswith(" {"):
            current = file.message_type.add(name=line.split()[1])
        elif current is not None and line.startswith("oneof ") and line.endswith(" {"):
            oneof = len(current.oneof_decl)
            current.oneof_decl.add(name=line.split()[1])
        elif line == "}":
            current, oneof = (current, None) if oneof is not None else (None, None)
        elif current is not None:
            current.field.append(_field(line, oneof))
        else:
            raise ValueError(f"unexpected line: {line!r}")
    return file


def _pool() -> descriptor_pool.DescriptorPool:
    # A pool of our own: the process-wide default one may hold another copy of these messages.
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(compile_declarations(_DECLARATIONS).SerializeToString())
    return pool


_POOL = _pool()


def message_class(name: str) -> type[message.Message]:
    """The message class of `openapi.v2.<name>`."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))
