// Command vaultd is not built yet.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "vaultd: not built yet")
	os.Exit(1)
}
