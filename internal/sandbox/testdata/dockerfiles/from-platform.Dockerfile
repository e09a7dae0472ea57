ARG BASE
FROM --platform=linux/arm64 $BASE
