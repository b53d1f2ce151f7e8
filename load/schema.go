package load

import _ "embed"

// SchemaJSON is the JSON Schema (draft 2020-12) of a v1 report, the file
// schema/load-report-v1.json.
//
//go:embed schema/load-report-v1.json
var SchemaJSON []byte
