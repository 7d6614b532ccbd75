// Package examples holds runnable programs that embed cozy-aio, and the data
// of the demo. Every program here is run by a test.
package examples
