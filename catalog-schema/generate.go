package schema

// The JSON Schema files for editors are made from the types in types.go.
//go:generate go run ./internal/jsonschemagen/gen -src . -out jsonschema
