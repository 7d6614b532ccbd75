package bootstrap

// Names the tests use and embedders do not need.

const FieldManager = fieldManager

type ApplyResult = applyResult

var (
	LoadObjects   = loadObjects
	ApplyObjects  = applyObjects
	ReadInventory = readInventory
)
