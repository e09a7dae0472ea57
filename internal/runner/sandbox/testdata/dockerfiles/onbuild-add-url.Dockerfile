FROM scratch
ONBUILD ADD http://10.0.0.1/x /x
