package main

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run this binary as the `hostd` command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"hostd": main})
}

// TestScripts runs every testdata/script/*.txtar: the commands an operator
// types on a node and what they must print.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}
