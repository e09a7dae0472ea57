FROM scratch
ADD http:\/\/10.0.0.1/secret /s
