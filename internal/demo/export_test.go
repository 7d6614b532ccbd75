package demo

// BuildCozy builds the cozy-aio binary once for the package's tests.
var BuildCozy = buildCozy
