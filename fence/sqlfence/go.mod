module github.com/fencelock/fencelock/fence/sqlfence

go 1.25.0

require github.com/fencelock/fencelock v0.1.0
