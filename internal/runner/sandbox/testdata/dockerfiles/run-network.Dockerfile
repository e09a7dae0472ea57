FROM scratch
RUN --network=host wget http://10.0.0.1/
