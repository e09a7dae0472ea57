# syntax=docker/dockerfile:1
FROM scratch
