FROM scratch
ARG U=http://10.0.0.1/secret
ADD ${U} /s
