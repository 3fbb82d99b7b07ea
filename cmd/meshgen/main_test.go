package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run this binary as the `meshgen` command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"meshgen": main})
}

// TestScripts runs every testdata/script/*.txtar: each is a session at a
// shell, the commands an operator types and what they must print.
func TestScripts(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Scripts reach the repository's examples as $EXAMPLES.
			env.Setenv("EXAMPLES", wd+"/../../examples")
			return nil
		},
	})
}
