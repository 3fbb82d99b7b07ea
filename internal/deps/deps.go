package deps

import (
	_ "filippo.io/age"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/goccy/go-yaml"
	_ "github.com/google/renameio/v2"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sigstore/cosign/v2/pkg/cosign"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "pgregory.net/rapid"
)
