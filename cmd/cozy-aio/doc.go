// Command cozy-aio runs the cozy-aio engine as one process, typically as a
// static pod with hostNetwork. It holds flags, wiring, signal handling and
// probes; the logic lives in the library packages.
package main
