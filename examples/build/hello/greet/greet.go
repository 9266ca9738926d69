// Package greet makes the greeting the hello program prints.
package greet

// Greeting returns the greeting for name.
func Greeting(name string) string {
	return "Hello, " + name + ", from inside the capfs sandbox!"
}
