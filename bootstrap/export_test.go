package bootstrap

// Names the tests use and embedders do not need.

const (
	FieldManager = fieldManager
	PhaseAll     = phaseAll
)

type (
	ApplyResult      = applyResult
	DiscoveryError   = discoveryError
	PreflightOptions = preflightOptions
)

var (
	LoadObjects         = loadObjects
	ApplyObjects        = applyObjects
	ReadInventory       = readInventory
	Discover            = discover
	ErrNoAPIServer      = errNoAPIServer
	APIServerEndpoints  = apiServerEndpoints
	IsNetworkUnit       = isNetworkUnit
	NetworkReady        = networkReady
	Preflight           = preflight
	StaticPod           = staticPod
	NotReadyTolerations = notReadyTolerations
)
