module github.com/fencelock/fencelock/mutants

go 1.25.0
