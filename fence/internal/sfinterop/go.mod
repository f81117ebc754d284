module github.com/fencelock/fencelock/fence/internal/sfinterop

go 1.25.0

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/fencelock/fencelock v0.1.0
)
