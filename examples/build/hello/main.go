// Command hello is the sample project of examples/build: `capfs run -- make` builds
// it inside the sandbox, and bin/hello comes back through sync-back.
package main

import (
	"fmt"
	"os"

	"example.com/hello/greet"
)

func main() {
	name := "world"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	fmt.Println(greet.Greeting(name))
}
