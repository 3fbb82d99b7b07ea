// Command hostd is not built yet.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hostd: not built yet")
	os.Exit(1)
}
